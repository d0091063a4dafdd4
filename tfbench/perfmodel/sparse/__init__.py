"""The sparse model: what a recommender's embedding tables cost a step.

laws         the sparse laws: unique rows of a batch under Zipf ids, the bytes of each strategy's rule
recommender  the recommender's step model, its fit, intervals and crossover
"""

"""tfbench's analytic performance model: predicts step time, images/sec, scaling efficiency and
the bottleneck of clusters larger than tfbench can run on one box. Its rooms:

dense      the step of a data-parallel cluster in equations (dense/: equations, terms, sync_step,
           shards, prediction, whatif, links)
sparse     what a recommender's embedding tables cost a step (sparse/: laws, recommender)
fitting    the model fitted on tfbench's runs, and the intervals of its predictions (fitting/)
curves     the model fitted on measured scaling curves of other clusters (curves/; data/ their tables)
protocols  the model's own terms for tfbench's strategies: the one place that translates them
intervals  an interval on a prediction, made from samples, and its coverage on held-out points
cost       cost and energy per unit of work, and the cheapest setting reaching a rate
render     the table, CSV and JSON that `python -m tools.model` prints

Only the standard library, numpy and scipy are imported here (no TensorFlow, nothing else of
tfbench), so predictions stay cheap and any tool may use them.
"""

"""The model fitted on measured scaling curves of other clusters (published tables, a user's CSV).

clusterfit     one synchronous step of g GPUs on n nodes, fitted on a curve
clusterspread  beta's range on measured scaling curves, the point rule, what would narrow them
published      the published curves shipped in tfbench/perfmodel/data/, and a user's own curve
clusternofit   a measured curve predicted with nothing fitted on it (the no-fit rule)
synthetic      recommender runs and cluster curves made by the model, to calibrate their intervals
"""

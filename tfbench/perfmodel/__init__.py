"""tfbench's analytic performance model: predicts step time, images/sec, scaling efficiency and
the bottleneck of clusters larger than tfbench can run on one box.

equations   every equation of the model (Hockney links; PS sync/async, ring, tree)
prediction  one point per worker count: the step's parts, rate, efficiency, bottleneck
whatif      derived answers: w*, ps shards needed, bandwidth where PS matches ring all-reduce
links       named link classes with a stated alpha; a measured link overrides
params      the parameters file that `fit` writes and `predict` reads
intervals   an interval on a prediction, made from samples, and its coverage on held-out points
spread      the bootstrap over tfbench runs that gives a fit's predictions their intervals
clusterspread  beta's range on measured scaling curves, the point rule, what would narrow them
measured    the protocol shares tfbench measured, for predictions with no fit
synthetic   runs made by the model itself, where the intervals' calibration can be checked
cost        cost and energy per unit of work, and the cheapest setting reaching a rate
render      the table, CSV and JSON that `python -m tools.model` prints

Only the standard library, numpy and scipy are imported here (no TensorFlow, nothing else of
tfbench), so predictions stay cheap and any tool may use them.
"""

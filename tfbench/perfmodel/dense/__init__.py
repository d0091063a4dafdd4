"""The dense model: a synchronous or asynchronous step of a data-parallel cluster, in equations.

equations   every equation of the model (Hockney links; PS sync/async, ring, tree)
terms       the mechanisms of large clusters (stragglers, barriers, frames, contention)
sync_step   one synchronous step with every term
shards      variables on parameter-server shards (the partitioners and placers)
prediction  one point per worker count: the step's parts, rate, efficiency, bottleneck
whatif      derived answers: w*, ps shards needed, bandwidth where PS matches ring all-reduce
links       named link classes with a stated alpha; a measured link overrides
"""

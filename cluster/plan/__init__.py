"""A run's plan: which processes (cluster.plan.topology), where, on which cores and ports, and
their TaskSpec and ClusterPlan (cluster.plan.spec), written as plan.json."""

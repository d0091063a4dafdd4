"""What the models are fed: synthetic ImageNet-like batches made before timing starts (synthetic)
and real images for convergence runs (datasets)."""

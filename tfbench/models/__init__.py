"""Model builders: each module builds one tf_keras model (tfbench.models.resnet, alexnet, lenet, tiny,
applications for every tf_keras.applications model, dlrm for the recommender, transformer for the
BERT-style encoder), importing TensorFlow only when called. What --model names, and which builder
each name uses, is the workload registry's (tfbench.workloads: an image model is one ModelSpec line
of tfbench.workloads.images)."""

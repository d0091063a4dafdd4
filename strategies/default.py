"""The default (single-device) strategy: the baseline every other strategy is compared to."""
from strategies.base import SyncAdapter


class DefaultAdapter(SyncAdapter):
    def make_strategy(self):
        from tfbench.framework.tf_import import tf

        return tf.distribute.get_strategy()

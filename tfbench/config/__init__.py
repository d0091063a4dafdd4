"""Configuration: every setting of a run (RunConfig), the values it may take, its validation,
the command-line flags that fill it and their help text.

Near the bottom of tfbench: it imports only the model registry, the data sets' names and the
framework's precision rules and GPU count, so that every layer above can read a RunConfig. The
strategies' traits (strategy_traits) and the kinds of launch (kinds) live here for the same reason.
"""
from tfbench.config.choices import (  # noqa: F401
                                    ALL_REDUCE,
                                    DATA_FORMATS,
                                    DEVICES,
                                    LAUNCHERS,
                                    LINK_PRESETS,
                                    MODES,
                                    NETWORKS,
                                    OPTIMIZERS,
                                    PLACEMENTS,
                                    PS_PLACEMENTS,
                                    TBF_MAX_BPS,
                                    effective_num_local_devices,
                                    effective_num_ps,
                                    is_this_machine,
                                    link_rate_bps,
)
from tfbench.config.errors import ConfigError  # noqa: F401
from tfbench.config.run_config import RunConfig  # noqa: F401
from tfbench.config.strategy_traits import STRATEGIES  # noqa: F401
from tfbench.config.validate import validate  # noqa: F401
from tfbench.framework.devices import count_gpus  # noqa: F401

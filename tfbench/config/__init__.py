"""Configuration: every setting of a run (RunConfig), the values it may take, its validation,
the command-line flags that fill it and their help text.

The bottom floor of tfbench: it imports only the model registry, the data sets' names and the
precision rules, so that every layer above can read a RunConfig.
"""
from tfbench.config.choices import (  # noqa: F401
                                    ALL_REDUCE,
                                    DATA_FORMATS,
                                    DEVICES,
                                    LAUNCHERS,
                                    LINK_PRESETS,
                                    MODES,
                                    MULTI_TASK_STRATEGIES,
                                    NETWORKS,
                                    PLACEMENTS,
                                    PS_PLACEMENTS,
                                    STRATEGIES,
                                    TBF_MAX_BPS,
                                    effective_num_local_devices,
                                    effective_num_ps,
                                    is_this_machine,
                                    link_rate_bps,
)
from tfbench.config.errors import ConfigError  # noqa: F401
from tfbench.config.run_config import RunConfig  # noqa: F401
from tfbench.config.validate import count_gpus, validate  # noqa: F401

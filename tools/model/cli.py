"""python -m tools.model VERB [--flag=value ...]: tfbench's analytic performance model.

Verbs:
  predict   step time, images/sec, scaling efficiency and bottleneck of a strategy at the worker
            counts asked, from a given or fitted compute time and a link class or rate
  fit       the parameters file from tfbench runs (python -m tools.model fit RUN_OR_SWEEP_DIR...)
  validate  fit on part of a sweep, predict the rest: measured, predicted, error per held-out run
  report    validate, fit and the what-if report of a sweep (`make model`): SWEEP_DIR/model/
  published fit the published InceptionV3 tables (Piz Daint, p2.xlarge, p2.8xlarge) on <= 16 GPUs,
            predict 32-128: measured, predicted, error per point and the median error
  cluster   the same from your own measurements (python -m tools.model cluster FILE.csv)
  scale     fit a sweep's runs with <= 4 workers, predict its 8-16 (`make model-scale`): error per N
            and strategy, its trend per doubling of N, the median error
  recommender  the same for a recommender's sweep (`make dlrm-scale`): its step model with embedding
            tables, each held-out run's error, where the parameter server overtakes all-gather
  cheapest  the cheapest node count and strategy reaching --target_rate images/sec at a stated price
  calibrate the coverage of the intervals on synthetic sweeps whose truth is known

Every prediction carries its interval (`predicted [low, high]`, with its level); every verb
prints a table, plain CSV or JSON, and with --price_per_node_hour or --watts_per_node the cost
and energy per image of every rate.

`python -m tools.model VERB --help` lists that verb's flags. The equations, the link classes and
the parameters file are in tfbench/perfmodel/. Exit code: 0 done, 2 bad input (one line
`tfbench: error: ...`, before any TensorFlow is imported).
"""
from __future__ import annotations

import sys
from typing import Callable, Dict, List, NamedTuple

from absl import app

from tfbench.config import helptext
from tools.model import calibrate, cheapest, fit, predict, published, recommender, report, scale


class Verb(NamedTuple):
    doc: str
    groups: Callable
    define: Callable[[], None]
    main: Callable[[List[str]], int]


VERBS: Dict[str, Verb] = {
    "predict": Verb(predict.__doc__, predict.help_groups, predict.define_flags, predict.main),
    "fit": Verb(fit.__doc__, fit.help_groups, fit.define_flags, fit.fit_main),
    "validate": Verb(fit.__doc__, fit.help_groups, fit.define_flags, fit.validate_main),
    "report": Verb(report.__doc__, report.help_groups, report.define_flags, report.main),
    "published": Verb(published.__doc__, published.help_groups, published.define_flags,
                      published.published_main),
    "cluster": Verb(published.__doc__, published.help_groups, published.define_flags,
                    published.cluster_main),
    "scale": Verb(scale.__doc__, scale.help_groups, scale.define_flags, scale.main),
    "recommender": Verb(recommender.__doc__, recommender.help_groups, recommender.define_flags, recommender.main),
    "cheapest": Verb(cheapest.__doc__, cheapest.help_groups, cheapest.define_flags, cheapest.main),
    "calibrate": Verb(calibrate.__doc__, calibrate.help_groups, calibrate.define_flags, calibrate.main),
}


def fail(message: str) -> None:
    print(f"tfbench: error: {message}", file=sys.stderr, flush=True)
    sys.exit(2)


def run(argv: List[str]) -> None:
    """Dispatches `argv[1]` (the verb) with the rest of the command line as its flags."""
    if len(argv) < 2 or (argv[1].startswith("-") and argv[1] not in helptext.ANY_HELP):
        fail(f"give a verb first: python -m tools.model VERB [--flag=value ...]; verbs: {', '.join(VERBS)}")
    if argv[1] in helptext.ANY_HELP:
        print(__doc__.strip())
        sys.exit(0)
    name = argv[1]
    if name not in VERBS:
        fail(f"unknown verb {name!r}; choose one of: {', '.join(VERBS)} (python -m tools.model --help)")
    verb = VERBS[name]
    app.run(verb.main, argv=[f"{argv[0]} {name}"] + argv[2:],
            flags_parser=helptext.parser(verb.doc, verb.groups, "tfbench", verb.define))


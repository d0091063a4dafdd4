"""python -m tools.model cheapest --target_rate=R --price_per_node_hour=P [predict's flags]: the
cheapest node count and strategy that reaches R images/sec at that price.

  e.g. python -m tools.model cheapest --target_rate=2000 --price_per_node_hour=3 \\
           --model=resnet50 --batch_size=32 --compute_ms_per_image=10 --link_bandwidth=10gbe

Predicts every strategy of --strategies at every worker count of --num_workers (default 1 to
1024: powers of two and the halfway points) exactly as `predict` does, with the same flags,
parameters file and intervals, and prints the settings whose predicted rate reaches R with their
nodes, rate [interval] and $ per million images [interval] (cheapest first), then two answers:
the cheapest whose predicted rate reaches R, and the cheapest whose interval's low end does (the
setting that reaches R even at the slow end of what the fit allows). --format=csv or json as
predict's.
"""
from __future__ import annotations

import sys
from typing import List

from absl import flags

from tfbench.config.errors import ConfigError
from tfbench.measure import variables as variables_lib
from tfbench.perfmodel import cost, render
from tfbench.perfmodel.dense import prediction, shards
from tfbench.perfmodel.fitting import params as params_lib
from tfbench.perfmodel.render import INTERVAL, NUMBER, TEXT, Column
from tools.model import predict, predict_rows, pricing

FLAGS = flags.FLAGS
CANDIDATES = [str(n) for n in sorted({2 ** i for i in range(11)} | {3 * 2 ** i for i in range(9)}) if n <= 1024]
COLUMNS = (Column("strategy", TEXT), Column("num_workers", NUMBER, 0), Column("nodes", NUMBER, 0),
           Column("images_per_sec", INTERVAL, 1))


def define_flags() -> None:
    predict.define_flags()
    if "target_rate" in FLAGS:
        return
    flags.DEFINE_float("target_rate", None, "The images/sec the work needs (R).")
    flags.DEFINE_list("strategies", ["parameter_server", "multi_worker_mirrored", "horovod"],
                      f"The strategies to consider: any of {', '.join(prediction.STRATEGIES)}.")


def help_groups():
    return [("Cheapest", ["target_rate", "strategies"])] + predict.help_groups()


def label(strategy: str) -> str:
    if strategy != "parameter_server":
        return strategy
    k = "one ps per node" if FLAGS.ps_per_worker else f"{FLAGS.num_ps or 1} ps"
    return f"parameter_server ({'sync' if FLAGS.ps_sync else 'async'}, {k}, {FLAGS.ps_placement})"


def options() -> List[cost.Option]:
    """Every strategy at every worker count, as predict would print it (ConfigError for bad input)."""
    if FLAGS.target_rate is None or not FLAGS.target_rate > 0:
        raise ConfigError(f"--target_rate must be a positive images/sec, got {FLAGS.target_rate}")
    unknown = [s for s in FLAGS.strategies if s not in prediction.STRATEGIES]
    if unknown or not FLAGS.strategies:
        raise ConfigError(f"--strategies: {','.join(unknown) or 'none given'}; choose from "
                          f"{', '.join(prediction.STRATEGIES)}")
    if not FLAGS["num_workers"].present:
        FLAGS.num_workers = CANDIDATES
    found = []
    for strategy in FLAGS.strategies:
        FLAGS.strategy = strategy
        counts, data, prices = predict.request()
        if prices.usd_per_node_hour is None:
            raise ConfigError("give --price_per_node_hour: the cheapest is a matter of price")
        counted = predict.counted_memory()
        variables = (shards.from_records(variables_lib.variables(FLAGS.model, FLAGS.image_size, FLAGS.num_classes))
                     if strategy == "parameter_server" else None)
        model = predict_rows.Model(counted, variables)
        facts = model.prepare(predict.resolve(data))
        refits = [predict.resolve(doc) for doc in params_lib.refits(data)] if data else []
        scatter = predict_rows.scatter_of(data, refits)
        found += [cost.Option(label(strategy), n, model.nodes(n), model.interval(n, facts, refits, scatter))
                  for n in counts]
    return found


def answer(best, target: float, sure: bool) -> str:
    what = "interval's low end" if sure else "predicted rate"
    if best is None:
        return f"cheapest whose {what} reaches {target:g} images/sec: none of these settings"
    option, usd = best
    return (f"cheapest whose {what} reaches {target:g} images/sec: {option.label} at {option.workers} workers "
            f"({option.nodes} nodes): {option.rate.text()} images/sec, ${usd.text(2)} per million images")


def main(argv) -> int:
    if len(argv) > 1:
        print(f"tfbench: error: unexpected arguments: {' '.join(argv[1:])}", file=sys.stderr)
        return 2
    try:
        found = options()
    except (ConfigError, params_lib.ParamsError) as e:
        print(f"tfbench: error: {e}", file=sys.stderr, flush=True)
        return 2
    price, target = FLAGS.price_per_node_hour, FLAGS.target_rate
    reaching = sorted((o for o in found if o.rate.point >= target),
                      key=lambda o: (cost.usd_per_million(o.rate.point, o.nodes, price), o.nodes))
    prices = pricing.prices()
    rows = [{"strategy": o.label, "num_workers": o.workers, "nodes": o.nodes, "images_per_sec": o.rate,
             **cost.per_unit(o.rate, o.nodes, prices)} for o in reaching]
    answers = [answer(cost.cheapest(found, target, price, sure), target, sure) for sure in (False, True)]
    columns = list(COLUMNS) + pricing.columns(prices)
    print(render.render(rows, columns, FLAGS.format, answers if FLAGS.format == "json" else ()))
    if FLAGS.format != "json":
        print("\n".join(answers), file=sys.stdout if FLAGS.format == "table" else sys.stderr)
    return 0

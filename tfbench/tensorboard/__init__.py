"""TensorBoard output: event files written without TensorFlow (events), the one time axis every
series shares (timeline), the custom-scalars layout a run opens on (layout), run-level HParams,
and the end-of-run hint that starts TensorBoard on it (hint)."""

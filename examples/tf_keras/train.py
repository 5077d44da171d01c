"""A small Keras model trained on CPU from a tf.data pipeline (read -> map -> batch -> prefetch), for profiling.

    python train.py --seconds 10 --profiler_port 6009            # model.fit, TF's profiler server on :6009
    python train.py --mode custom --slow_map_ms 2                # custom loop, each step in a profiler Trace
    python train.py --announce                                   # tell the local podscope agent about the server

The pipeline reads TFRecord examples written at start into a temporary directory, parses each one in a map
stage (`--slow_map_ms` adds that much sleep per element there, making the job input-bound), batches them and
prefetches up to 8 batches. `--mode fit` trains with `model.fit` (with TensorFlow 2.21 and Keras 3 the profiler sees
each step as one call of Keras's tf.function `multi_step_on_iterator`, with no `train` marker); `--mode custom` runs
its own loop, each step inside `tf.profiler.experimental.Trace("train", step_num=...)`.

On stdout, one line per finished step `step N start_ns end_ns` (wall clock, Unix ns) when `--step_lines` is
given, and at the end one machine-readable line
    trainer {"mode": ..., "steps": N, "mean_step_ms": M}
with the mean over every step after the first `--warmup_steps`, as the trainer measured them itself.
"""

import argparse
import json
import os
import sys
import tempfile
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

FEATURES = 32
CLASSES = 10


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mode", choices=["fit", "custom"], default="fit")
    parser.add_argument("--seconds", type=float, default=10.0, help="train for this long (after warm-up)")
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--hidden", type=int, default=1024)
    parser.add_argument("--slow_map_ms", type=float, default=0.0, help="sleep per element in the map stage")
    parser.add_argument("--profiler_port", type=int, default=0, help="start TensorFlow's profiler server here")
    parser.add_argument("--announce", action="store_true",
                        help="announce the profiler server to the local podscope agent (podscope.announce_profiler)")
    parser.add_argument("--warmup_steps", type=int, default=5)
    parser.add_argument("--step_lines", action="store_true", help="print every step's start and end")
    return parser.parse_args()


def write_records(directory, count=2048):
    """The pipeline's source: `count` serialized examples in one TFRecord file."""
    path = os.path.join(directory, "train.tfrecord")
    rng = np.random.default_rng(0)
    with tf.io.TFRecordWriter(path) as writer:
        for _ in range(count):
            x = rng.standard_normal(FEATURES).astype(np.float32)
            y = int(np.argmax(x[:CLASSES]))
            example = tf.train.Example(features=tf.train.Features(feature={
                "x": tf.train.Feature(float_list=tf.train.FloatList(value=x)),
                "y": tf.train.Feature(int64_list=tf.train.Int64List(value=[y]))}))
            writer.write(example.SerializeToString())
    return path


def dataset(path, batch, slow_map_ms):
    spec = {"x": tf.io.FixedLenFeature([FEATURES], tf.float32), "y": tf.io.FixedLenFeature([], tf.int64)}

    def sleep(x):
        time.sleep(slow_map_ms / 1000.0)
        return x

    def parse(record):
        example = tf.io.parse_single_example(record, spec)
        x = example["x"]
        if slow_map_ms > 0:
            x = tf.reshape(tf.py_function(sleep, [x], tf.float32), [FEATURES])
        return x, example["y"]

    # Without map-and-batch fusion the map stage stays its own iterator (`Map`), which the profiler names.
    options = tf.data.Options()
    options.experimental_optimization.map_and_batch_fusion = False
    pipeline = tf.data.TFRecordDataset(path).repeat().map(parse).batch(batch, drop_remainder=True).prefetch(8)
    return pipeline.with_options(options)


def model(hidden):
    m = tf.keras.Sequential([tf.keras.Input((FEATURES,)), tf.keras.layers.Dense(hidden, activation="relu"),
                             tf.keras.layers.Dense(hidden, activation="relu"), tf.keras.layers.Dense(CLASSES)])
    m.compile(optimizer="adam", loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    return m


class StepClock:
    """The trainer's own measure of each step: wall-clock start and end, Unix ns."""

    def __init__(self, print_lines):
        self.spans = []
        self.print_lines = print_lines

    def record(self, step, start_ns, end_ns):
        self.spans.append((start_ns, end_ns))
        if self.print_lines:
            print(f"step {step} {start_ns} {end_ns}", flush=True)

    def summary(self, mode, warmup):
        kept = self.spans[warmup:]
        mean_ms = sum(e - s for s, e in kept) / len(kept) / 1e6 if kept else 0.0
        return {"mode": mode, "steps": len(kept), "mean_step_ms": round(mean_ms, 4)}


class FitSteps(tf.keras.callbacks.Callback):
    """Times model.fit's steps from Keras' batch hooks and stops the epoch once `deadline` has passed."""

    def __init__(self, clock, seconds, warmup):
        super().__init__()
        self.clock, self.seconds, self.warmup = clock, seconds, warmup
        self.deadline = None
        self.step = 0
        self.start_ns = 0

    def on_train_batch_begin(self, batch, logs=None):
        if self.deadline is None:  # the first step's tracing and compilation are not training time
            self.deadline = time.monotonic() + self.seconds
        self.start_ns = time.time_ns()

    def on_train_batch_end(self, batch, logs=None):
        self.clock.record(self.step, self.start_ns, time.time_ns())
        self.step += 1
        if self.step > self.warmup and time.monotonic() > self.deadline:
            self.model.stop_training = True


def train_fit(m, data, clock, args):
    steps = FitSteps(clock, args.seconds, args.warmup_steps)
    # steps_per_execution 1 (the default): one traced step per batch; the epoch is long, the callback ends it.
    m.fit(data, epochs=1, steps_per_epoch=10 ** 9, verbose=0, callbacks=[steps])


def train_custom(m, data, clock, args):
    loss_fn = m.loss
    optimizer = m.optimizer

    @tf.function
    def train_step(x, y):
        with tf.GradientTape() as tape:
            loss = loss_fn(y, m(x, training=True))
        optimizer.apply_gradients(zip(tape.gradient(loss, m.trainable_variables), m.trainable_variables))
        return loss

    it = iter(data)
    deadline = None
    step = 0
    while deadline is None or step <= args.warmup_steps or time.monotonic() < deadline:
        if step == 1:  # the first step's tracing and compilation are not training time
            deadline = time.monotonic() + args.seconds
        start_ns = time.time_ns()
        with tf.profiler.experimental.Trace("train", step_num=step, _r=1):
            x, y = next(it)
            train_step(x, y)
        clock.record(step, start_ns, time.time_ns())
        step += 1


def main():
    args = parse_args()
    if args.profiler_port:
        tf.profiler.experimental.server.start(args.profiler_port)
        if args.announce:
            import podscope
            podscope.announce_profiler(args.profiler_port)
        print(f"profiler server on port {args.profiler_port}", flush=True)
    with tempfile.TemporaryDirectory(prefix="tf_keras_") as directory:
        data = dataset(write_records(directory), args.batch, args.slow_map_ms)
        m = model(args.hidden)
        clock = StepClock(args.step_lines)
        print("training", flush=True)
        (train_fit if args.mode == "fit" else train_custom)(m, data, clock, args)
    print("trainer " + json.dumps(clock.summary(args.mode, args.warmup_steps)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

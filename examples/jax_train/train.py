"""A JAX training loop on CPU (a small MLP regression by plain SGD), for profiling.

    python train.py --seconds 10 --profiler_port 6009            # JAX's profiler server on :6009
    python train.py --trace_dir /tmp/jax_trace --seconds 3        # write a trace with jax.profiler.trace
    python train.py --announce --profiler_port 6009               # tell the local podscope agent about the server

Each step runs inside `jax.profiler.StepTraceAnnotation("train", step_num=step)`, which JAX's profiler writes as
the step's marker; the step blocks on its result, so the annotation spans the step's whole work.

On stdout, one line per finished step `step N start_ns end_ns` (wall clock, Unix ns) when `--step_lines` is
given, and at the end one machine-readable line
    trainer {"mode": "jax", "steps": N, "mean_step_ms": M}
with the mean over every step after the first `--warmup_steps`, as the trainer measured them itself.
"""

import argparse
import json
import sys
import time

import jax
import jax.numpy as jnp


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=10.0, help="train for this long (after the first step)")
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--hidden", type=int, default=512)
    parser.add_argument("--profiler_port", type=int, default=0, help="start JAX's profiler server here")
    parser.add_argument("--announce", action="store_true",
                        help="announce the profiler server to the local podscope agent (podscope.announce_profiler)")
    parser.add_argument("--trace_dir", default="", help="trace the whole run with jax.profiler.trace into here")
    parser.add_argument("--warmup_steps", type=int, default=3)
    parser.add_argument("--step_lines", action="store_true", help="print every step's start and end")
    return parser.parse_args()


def init_params(key, sizes):
    params = []
    for fan_in, fan_out in zip(sizes[:-1], sizes[1:]):
        key, sub = jax.random.split(key)
        params.append((jax.random.normal(sub, (fan_in, fan_out)) / jnp.sqrt(fan_in), jnp.zeros(fan_out)))
    return params


def forward(params, x):
    for w, b in params[:-1]:
        x = jnp.tanh(x @ w + b)
    w, b = params[-1]
    return x @ w + b


def loss(params, x, y):
    return jnp.mean((forward(params, x) - y) ** 2)


@jax.jit
def sgd_step(params, x, y):
    grads = jax.grad(loss)(params, x, y)
    return [(w - 0.01 * gw, b - 0.01 * gb) for (w, b), (gw, gb) in zip(params, grads)]


def train(args):
    key = jax.random.PRNGKey(0)
    params = init_params(key, [64, args.hidden, args.hidden, 1])
    spans = []
    step = 0
    deadline = None
    while deadline is None or step <= args.warmup_steps or time.monotonic() < deadline:
        if step == 1:  # the first step compiles: it is not training time
            deadline = time.monotonic() + args.seconds
        start_ns = time.time_ns()
        with jax.profiler.StepTraceAnnotation("train", step_num=step):
            key, sub = jax.random.split(key)
            x = jax.random.normal(sub, (args.batch, 64))
            y = jnp.sum(x[:, :4], axis=1, keepdims=True)
            params = sgd_step(params, x, y)
            jax.block_until_ready(params)
        end_ns = time.time_ns()
        spans.append((start_ns, end_ns))
        if args.step_lines:
            print(f"step {step} {start_ns} {end_ns}", flush=True)
        step += 1
    kept = spans[args.warmup_steps:]
    mean_ms = sum(e - s for s, e in kept) / len(kept) / 1e6 if kept else 0.0
    return {"mode": "jax", "steps": len(kept), "mean_step_ms": round(mean_ms, 4)}


def main():
    args = parse_args()
    if args.profiler_port:
        jax.profiler.start_server(args.profiler_port)
        if args.announce:
            import podscope
            podscope.announce_profiler(args.profiler_port)
        print(f"profiler server on port {args.profiler_port}", flush=True)
    print("training", flush=True)
    if args.trace_dir:
        with jax.profiler.trace(args.trace_dir):
            summary = train(args)
    else:
        summary = train(args)
    print("trainer " + json.dumps(summary), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

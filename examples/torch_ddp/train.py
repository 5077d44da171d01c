"""A small model trained with DistributedDataParallel over gloo, on CPU or GPUs: a PyTorch pod to profile.

Launch with torchrun, one process per rank:

    torchrun --standalone --nproc_per_node 4 examples/torch_ddp/train.py --steps 20

Nothing in it knows about podscope. Two ways to trace it:
  * --trace-dir DIR: each rank writes its own torch.profiler trace there (tensorboard_trace_handler, gzipped) for
    `podscope analyze DIR`;
  * start it with KINETO_USE_DAEMON=1 beside a podscope agent and run `podscope capture`: Kineto asks the agent for
    a trace config at each poll, and the agent collects every rank's trace on one clock.

Flags that make a known bottleneck: --slow-rank R (rank R computes --slow-ms more per step, so the other ranks
wait for it in the gradient all-reduce) and --slow-loader-ms (each batch takes that long to load: input-bound).
"""

import argparse
import os
import time
from contextlib import nullcontext

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, Dataset


def parse_args():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--steps", type=int, default=20, help="training steps (0: run until --seconds pass)")
    p.add_argument("--seconds", type=float, default=0, help="with --steps 0: train this long")
    p.add_argument("--batch", type=int, default=32, help="examples per rank and step")
    p.add_argument("--width", type=int, default=128, help="features and hidden units of the model")
    p.add_argument("--slow-rank", type=int, default=-1, help="the rank that computes --slow-ms more per step")
    p.add_argument("--slow-ms", type=float, default=30.0, help="extra compute of --slow-rank per step, ms")
    p.add_argument("--slow-loader-ms", type=float, default=0.0, help="time to load each batch, ms")
    p.add_argument("--trace-dir", default="", help="write each rank's torch.profiler trace into this directory")
    p.add_argument("--trace-steps", type=int, default=10, help="with --trace-dir: steps traced (after 2 unrecorded)")
    p.add_argument("--device", choices=["cpu", "cuda"], default="cpu",
                   help="where each rank trains; cuda puts rank r on GPU (local rank mod GPUs), gloo still all-reduces")
    return p.parse_args()


class RandomRegression(Dataset):
    """Random examples of a fixed linear map; each one takes --slow-loader-ms / batch to load."""

    def __init__(self, width, length, load_ms_per_item):
        g = torch.Generator().manual_seed(0)
        self.x = torch.randn(length, width, generator=g)
        self.y = self.x @ torch.randn(width, 1, generator=g)
        self.load_s = load_ms_per_item / 1e3

    def __len__(self):
        return len(self.x)

    def __getitem__(self, i):
        if self.load_s > 0:
            time.sleep(self.load_s)  # a slow disk or decoder
        return self.x[i], self.y[i]


def extra_compute(ms, width, device):
    """Matrix products until `ms` of wall time have passed: a rank with more work than the others. On a GPU each
    product is waited for, so the time is spent, not only queued."""
    with torch.profiler.record_function("extra_compute"):
        a = torch.randn(2 * width, 2 * width, device=device)
        deadline = time.perf_counter() + ms / 1e3
        while time.perf_counter() < deadline:
            a = torch.tanh(a @ a)
            if device.type == "cuda":
                torch.cuda.synchronize(device)


def time_is_up(end_time, step):
    """With --seconds: whether any rank is past its end, asked of all every 20 steps (outside the steps), so that
    every rank stops after the same step."""
    if end_time is None or step % 20 != 0:
        return False
    late = torch.tensor([1.0 if time.monotonic() >= end_time else 0.0])
    dist.all_reduce(late, op=dist.ReduceOp.MAX)
    return late.item() > 0


def main():
    args = parse_args()
    torch.set_num_threads(1)  # one core per rank is plenty for this model
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.manual_seed(rank)
    device = torch.device("cpu")
    if args.device == "cuda":
        local_rank = int(os.environ.get("LOCAL_RANK", rank))
        device = torch.device("cuda", local_rank % torch.cuda.device_count())
        torch.cuda.set_device(device)

    model = DistributedDataParallel(
        nn.Sequential(nn.Linear(args.width, args.width), nn.ReLU(), nn.Linear(args.width, 1)).to(device),
        device_ids=[device.index] if device.type == "cuda" else None)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    steps = args.steps if args.steps > 0 else 1 << 30
    dataset = RandomRegression(args.width, args.batch * min(steps, 64), args.slow_loader_ms / args.batch)
    loader = DataLoader(dataset, batch_size=args.batch, shuffle=True, num_workers=0)

    profiler = None
    if args.trace_dir:
        profiler = torch.profiler.profile(
            activities=[torch.profiler.ProfilerActivity.CPU] +
            ([torch.profiler.ProfilerActivity.CUDA] if device.type == "cuda" else []),
            schedule=torch.profiler.schedule(wait=1, warmup=1, active=args.trace_steps, repeat=1),
            on_trace_ready=torch.profiler.tensorboard_trace_handler(args.trace_dir, worker_name=f"rank{rank}",
                                                                    use_gzip=True))
        profiler.start()
        steps = min(steps, 2 + args.trace_steps)

    end_time = time.monotonic() + args.seconds if args.steps <= 0 else None
    batches = iter(loader)
    step = 0
    while step < steps and not time_is_up(end_time, step):
        # torch.profiler's schedule names each step ProfilerStep#<n>; a trace Kineto takes on demand (a daemon's
        # request) has no schedule, so the step is named so here: every rank numbers its steps alike.
        with nullcontext() if profiler else torch.profiler.record_function(f"ProfilerStep#{step + 1}"):
            batch = next(batches, None)
            if batch is None:  # a new epoch
                batches = iter(loader)
                batch = next(batches)
            x, y = (t.to(device) for t in batch)
            loss = nn.functional.mse_loss(model(x), y)
            if rank == args.slow_rank:
                extra_compute(args.slow_ms, args.width, device)
            optimizer.zero_grad()
            loss.backward()  # DDP all-reduces the gradients here: every rank waits for the slowest
            optimizer.step()
        step += 1
        if step == 1:
            print(f"rank {rank}: training", flush=True)
        if profiler:
            profiler.step()
    if profiler:
        profiler.stop()
    world_size = dist.get_world_size()
    dist.barrier()
    dist.destroy_process_group()
    if rank == 0:
        print(f"trained {step} steps on {world_size} ranks", flush=True)


if __name__ == "__main__":
    main()

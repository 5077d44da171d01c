"""A PyTorch training loop with nothing of podscope in it: a linear model and SGD on CPU, for `seconds`.
Started with KINETO_USE_DAEMON=1, its Kineto polls the agent for trace requests."""
import os
import sys
import time

import torch


def main():
    seconds = float(sys.argv[1])
    model = torch.nn.Sequential(torch.nn.Linear(256, 256), torch.nn.ReLU(), torch.nn.Linear(256, 16))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    print("ready", os.getpid(), flush=True)
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        x = torch.randn(64, 256)
        loss = model(x).square().mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        time.sleep(0.005)


if __name__ == "__main__":
    main()

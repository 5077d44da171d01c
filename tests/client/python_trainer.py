"""A small Python training loop annotated through client/python/podscope.py, driven by python_client_test.

Usage: python_trainer.py SOCKET_PATH STOP_FILE — steps until STOP_FILE exists, then shuts down cleanly.
"""
import os
import sys
import time

import podscope

socket_path, stop_file = sys.argv[1:3]
podscope.init(cores=[11], job="python-job", socket_path=socket_path)
try:
    podscope.input_stage("py_batch", "decode")
    sys.exit("an unknown input stage category was accepted")
except ValueError:
    pass
step = 0
while not os.path.exists(stop_file):
    with podscope.step(step):
        with podscope.infeed(64):
            with podscope.input_stage("py_batch", "preprocess") as batch:
                with podscope.input_stage("py_read", "read", parent=batch):
                    time.sleep(0.001)
                with podscope.input_stage("py_collate", "enqueue", parent=batch.input_stage_id):
                    pass
        podscope.alloc(1000, 0x10000 + step * 64, "py_pool", op="py_batch_buffer")
        with podscope.compute("py_matmul", flops=1000, nbytes=256):
            sum(i * i for i in range(200))
        with podscope.all_reduce(step, 4096, replica_group="{11,12}"):
            s = podscope.send(3, 12, 4096)
            s.end()
            with podscope.recv_done(4, 12, 4096):
                pass
        podscope.free(0x10000 + step * 64, "py_pool")
    step += 1
podscope.shutdown()

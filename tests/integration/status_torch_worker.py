"""A torch worker that sends metric points with ddprun.publish_point (status_page_test.py torch;
docs/status.md): the package comes from the PYTHONPATH the agent gives its workers, from nothing
else. Every rank calls it every 50 ms with a falling loss, rank 0 with 2 / step, the others with a
negative loss that must never reach the page (only rank 0 sends), until it is stopped."""
import os
import time

import ddprun

rank = int(os.environ["RANK"])
for step in range(1, 100000):
    loss = 2.0 / step if rank == 0 else -1.0
    ddprun.publish_point(step, loss=loss, samples_per_s=1000.0 + step)
    time.sleep(0.05)  # the pace of a training loop, not a wait for anything

"""A torch worker that sends metric points with the README's own snippet (status_page_test.py
torch): the ```python block of README.md that defines publish_point() is executed as written, then
rank 0 publishes a point every 50 ms (a falling loss) until it is stopped."""
import os
import re
import time

README = os.path.join(os.environ["DDP_SOURCE_DIR"], "README.md")
snippet = next(block for block in re.findall(r"```python\n(.*?)```", open(README).read(), re.S)
               if "def publish_point" in block)
exec(snippet)  # defines publish_point

if os.environ["RANK"] == "0":
    for step in range(1, 100000):
        publish_point(step, 2.0 / step, 1000.0 + step)  # noqa: F821 (from the README)
        time.sleep(0.05)
else:
    time.sleep(3600)

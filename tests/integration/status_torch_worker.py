"""A torch worker that sends metric points with the docs' own snippet (status_page_test.py
torch): the ```python block of README.md or docs/*.md (docs/status.md today) that defines
publish_point() is executed as written, then rank 0 publishes a point every 50 ms (a falling loss)
until it is stopped."""
import os
import re
import time

SRC = os.environ["DDP_SOURCE_DIR"]
DOCS = [os.path.join(SRC, "README.md")] + sorted(
    os.path.join(SRC, "docs", n) for n in os.listdir(os.path.join(SRC, "docs")) if n.endswith(".md"))
snippet = next(block for path in DOCS
               for block in re.findall(r"```python\n(.*?)```", open(path).read(), re.S)
               if "def publish_point" in block)
exec(snippet)  # defines publish_point

if os.environ["RANK"] == "0":
    for step in range(1, 100000):
        publish_point(step, 2.0 / step, 1000.0 + step)  # noqa: F821 (from the docs)
        time.sleep(0.05)
else:
    time.sleep(3600)

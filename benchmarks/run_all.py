"""`make bench`: every benchmark script in turn; each writes its section of RESULTS.md."""
import runpy
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
SCRIPTS = ["overhead.py", "attention.py", "training.py", "decoding.py", "checkpoints.py",
           "families.py", "generation.py", "lora.py", "fsdp.py", "trace.py"]

if __name__ == "__main__":
    extra = sys.argv[1:]                      # e.g. --quick, passed to every script
    for name in SCRIPTS:
        print(f"== {name}", flush=True)
        sys.argv = [str(HERE / name), *extra]
        runpy.run_path(str(HERE / name), run_name="__main__")

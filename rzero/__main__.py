import sys

from rzero.cli import main

# vLLM (and DataLoader workers) start processes with `spawn`, which imports this module
# again in each child as `__mp_main__`: only the parent may run the command
if __name__ == "__main__":
    sys.exit(main())

import argparse
import sys

from .cli import add_arguments, main

if __name__ == "__main__":
    sys.exit(main(add_arguments(argparse.ArgumentParser(prog="python -m llm_simulator")).parse_args()))

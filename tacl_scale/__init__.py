"""tacl-scale: continual pre-training of BERT with TaCL at cluster scale."""

__version__ = "0.1.0"

# The exit status of every command that refuses its input or fails ("error: ..." on
# stderr), as argparse's for a usage error; 0 on success.
EXIT_ERROR = 2

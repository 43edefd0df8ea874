"""tacl-scale: continual pre-training of BERT with TaCL at cluster scale."""

__version__ = "0.1.0"

# The exit status of every command that refuses its input or fails ("error: ..." on
# stderr), as argparse's for a usage error; 0 on success.
EXIT_ERROR = 2
# Ended by Ctrl-C ("interrupted" on stderr): 128 + SIGINT, as a shell reports it.
EXIT_INTERRUPTED = 130

"""tacl-scale: continual pre-training of BERT with TaCL at cluster scale."""

__version__ = "0.1.0"

"""tilecast: forecast GPU training and inference latency from operator graphs and tile predictors."""

__version__ = "0.1.0"

"""evekit: evaluate language models on Earth-Observation knowledge (the EVE suite), notebook-first."""
__version__ = "0.1.0"

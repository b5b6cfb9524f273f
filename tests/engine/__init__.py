"""The training loop: accumulation, training control, non-finite losses."""

"""The training engine: the Trainer loop, evaluation, training control."""

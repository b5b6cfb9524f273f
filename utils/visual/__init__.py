"""Pictures for TensorBoard: input batches as image grids with captions, confusion matrices."""

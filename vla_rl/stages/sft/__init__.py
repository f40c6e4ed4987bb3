"""Behaviour cloning (SFT): the demonstrations (:mod:`.demos`, :mod:`.statistics`), their batches
(:mod:`.batches`), the section's schema (:mod:`.config`) and the training loop (:mod:`.training`)."""

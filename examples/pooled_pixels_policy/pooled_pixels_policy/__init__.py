"""An example policy written from scratch and plugged into vla-rl by import path (``policy.factory``)."""

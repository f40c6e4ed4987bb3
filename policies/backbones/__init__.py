"""Pretrained vision-language backbones for VLAs (Hugging Face transformers, from local folders)."""

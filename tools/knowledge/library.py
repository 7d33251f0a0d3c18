"""The help center a process searches: its index, rebuilt from the directory when files change."""

from pathlib import Path

DEFAULT_KNOWLEDGE_DIR = Path(__file__).with_name("demo")

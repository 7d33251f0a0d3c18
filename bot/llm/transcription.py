"""Speech to text: the seam voice messages use (OpenAI-compatible: ``OpenAITranscriber``)."""

from typing import Protocol


class Transcriber(Protocol):
    """Turns one recorded message into its words; raises ``LLMClientError`` subtypes on failure."""

    @property
    def model_name(self) -> str:
        """The transcription model asked."""
        ...

    async def transcribe(self, audio: bytes, *, filename: str) -> str:
        """The words spoken in ``audio``, a file whose name ``filename`` says its format."""
        ...

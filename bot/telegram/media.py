"""What the customer sends besides text, as the handlers reach it: one object, ``media``.

Voice messages to words (:mod:`bot.telegram.voice`), photos for the model
(:mod:`bot.telegram.photos`) and an album gathered into one message
(:mod:`bot.telegram.albums`).
"""

from dataclasses import dataclass

from bot.telegram.albums import Albums
from bot.telegram.photos import Photos
from bot.telegram.voice import VoiceMessages


@dataclass(frozen=True, kw_only=True)
class Media:
    """Voice messages, photos and albums of one dispatcher."""

    voice: VoiceMessages
    photos: Photos
    albums: Albums

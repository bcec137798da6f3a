# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""The umT5 prompt tokenizer: sentencepiece, read from a local file, never from a hub.

Upstream DreamZero tokenizes prompts with the Hugging Face tokenizer of ``google/umt5-xxl``
(``AutoTokenizer``, 512 tokens, ``padding='max_length'``, ``truncation=True``, special tokens on)
after Wan's ``whitespace`` cleaning (``ftfy.fix_text``, HTML unescaping twice, strip, whitespace
runs collapsed to one space). That tokenizer is a unigram sentencepiece model with no
sequence-start token: ids are the pieces of the text, truncated to ``max_length - 1``, then
``</s>``, then ``<pad>`` up to ``max_length``; the attention mask is 1 on the pieces and ``</s>``.

Checkpoint layout: the sentencepiece model of ``google/umt5-xxl`` (its ``spiece.model``) goes in
``<checkpoint>/tokenizer/spiece.model`` (:data:`TOKENIZER_FILE`). ``tokenizer.json`` and the
other Hugging Face files of that repository are not needed.
"""

from __future__ import annotations

from collections.abc import Sequence
import html
import io
from pathlib import Path
import re

import ftfy
import sentencepiece as spm
import torch

#: Path of the sentencepiece model inside a checkpoint folder.
TOKENIZER_FILE = Path('tokenizer') / 'spiece.model'
#: Prompt length of the umT5 text encoder in DreamZero.
MAX_LENGTH = 512

_WHITESPACE = re.compile(r'\s+')

# Built-in text for the tiny tokenizer: DROID-style instructions, the prompt template, the negative
# prompt and every printable ASCII character.
_TINY_CORPUS = """\
A multi-view video shows that a robot pick up the red cup and put it in the sink.
The video is split into three views: The top view shows the camera view from the robot's wrist,
the bottom-left view shows the camera view from the left exterior camera, and the bottom-right
view shows the camera view from the right exterior camera. During training, one of the two bottom
exterior views may be a black screen (dropped view). The robot
open the drawer, close the drawer, move the marker into the bowl, wipe the table with the towel.
Put the spoon next to the plate. Stack the blue block on top of the green block.
Turn the faucet on. Fold the cloth. Place the lid on the pot. Push the button twice.
Vibrant colors, overexposed, static, blurry details, text, subtitles, style, artwork, painting,
image, still, grayscale, dull, worst quality, low quality, JPEG artifacts, ugly, mutilated,
extra fingers, bad hands, bad face, deformed, disfigured, mutated limbs, fused fingers,
stagnant image, cluttered background, three legs, many people in the background, walking backwards.
A B C D E F G H I J K L M N O P Q R S T U V W X Y Z
a b c d e f g h i j k l m n o p q r s t u v w x y z
0 1 2 3 4 5 6 7 8 9 . , ; : ! ? ' " ( ) [ ] { } < > - _ + = * / \\ | & % $ # @ ^ ~ `
"""


def clean_prompt(text: str) -> str:
    """Wan's ``whitespace`` cleaning: fix mojibake, unescape HTML twice, collapse whitespace."""
    text = html.unescape(html.unescape(ftfy.fix_text(text))).strip()
    return _WHITESPACE.sub(' ', text).strip()


class UMT5Tokenizer:
    """Tokenizes prompts to fixed-length umT5 ids and attention masks.

    Args:
        model_file: a sentencepiece ``.model`` file with ``<pad>``, ``</s>`` and ``<unk>`` pieces.
        max_length: length of every output row (truncation and padding), 512 in DreamZero.

    """

    def __init__(self, model_file: str | Path, max_length: int = MAX_LENGTH) -> None:
        model_file = Path(model_file)
        if not model_file.is_file():
            raise FileNotFoundError(f'sentencepiece model not found: {model_file}')
        if max_length < 1:
            raise ValueError(f'max_length must be positive, got {max_length}')
        self._sp = spm.SentencePieceProcessor(model_file=str(model_file))
        self.max_length = max_length
        self.pad_id = self._special_id('<pad>')
        self.eos_id = self._special_id('</s>')

    @classmethod
    def from_folder(cls, folder: str | Path, max_length: int = MAX_LENGTH) -> UMT5Tokenizer:
        """Load ``<folder>/tokenizer/spiece.model`` (the checkpoint layout)."""
        return cls(Path(folder) / TOKENIZER_FILE, max_length)

    def _special_id(self, piece: str) -> int:
        piece_id = self._sp.piece_to_id(piece)
        if self._sp.id_to_piece(piece_id) != piece:
            raise ValueError(f'sentencepiece model has no {piece!r} piece')
        return piece_id

    @property
    def vocab_size(self) -> int:
        """Number of pieces in the sentencepiece model (ids are below this)."""
        return self._sp.get_piece_size()

    def encode(self, text: str) -> list[int]:
        """Ids of one cleaned prompt, truncated, with ``</s>`` and without padding."""
        ids = self._sp.encode(clean_prompt(text))
        return ids[: self.max_length - 1] + [self.eos_id]

    def __call__(self, texts: str | Sequence[str]) -> tuple[torch.Tensor, torch.Tensor]:
        """Tokenize one prompt or a batch.

        Returns:
            ``(ids, mask)``, both int64 of shape ``(B, max_length)``; ``mask`` is 1 on real
            tokens (the prompt pieces and ``</s>``) and 0 on padding.

        """
        if isinstance(texts, str):
            texts = [texts]
        if not texts or not all(isinstance(text, str) for text in texts):
            raise TypeError('texts must be a string or a non-empty sequence of strings')
        ids = torch.full((len(texts), self.max_length), self.pad_id, dtype=torch.int64)
        mask = torch.zeros((len(texts), self.max_length), dtype=torch.int64)
        for row, text in enumerate(texts):
            pieces = self.encode(text)
            ids[row, : len(pieces)] = torch.tensor(pieces, dtype=torch.int64)
            mask[row, : len(pieces)] = 1
        return ids, mask


def train_tiny_tokenizer(folder: str | Path, vocab_size: int = 256) -> Path:
    """Train a small umT5-style sentencepiece model on a built-in text, for tests and the demo.

    The model has the umT5 special ids (``<pad>`` 0, ``</s>`` 1, ``<unk>`` 2, no ``<s>``) and is
    written to ``<folder>/tokenizer/spiece.model``, the checkpoint layout.

    Returns:
        The path of the written model file.

    """
    path = Path(folder) / TOKENIZER_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    model = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(_TINY_CORPUS.splitlines()),
        model_writer=model,
        model_type='unigram',
        vocab_size=vocab_size,
        hard_vocab_limit=False,
        character_coverage=1.0,
        pad_id=0,
        eos_id=1,
        unk_id=2,
        bos_id=-1,
        num_threads=1,
        minloglevel=2,
    )
    path.write_bytes(model.getvalue())
    return path

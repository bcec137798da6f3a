# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""The umT5 tokenizer wrapper: checkpoint layout, special ids, cleaning, padding, truncation."""

import pytest
import sentencepiece as spm
import torch

from dreamzero_ros.engine.checkpoint.tokenizer import (
    MAX_LENGTH,
    TOKENIZER_FILE,
    UMT5Tokenizer,
    clean_prompt,
    train_tiny_tokenizer,
)
from dreamzero_ros.engine.networks.text_encoder import T5Config


@pytest.fixture(scope='module')
def tokenizer(tmp_path_factory):
    folder = tmp_path_factory.mktemp('ckpt')
    train_tiny_tokenizer(folder)
    return UMT5Tokenizer.from_folder(folder)


def test_tiny_tokenizer_uses_checkpoint_layout_and_umt5_special_ids(tmp_path):
    path = train_tiny_tokenizer(tmp_path, vocab_size=200)
    assert path == tmp_path / TOKENIZER_FILE == tmp_path / 'tokenizer' / 'spiece.model'
    tok = UMT5Tokenizer(path)
    assert (tok.pad_id, tok.eos_id) == (0, 1)
    assert tok.max_length == MAX_LENGTH == T5Config.umt5_xxl().text_len
    assert 100 < tok.vocab_size <= 200
    assert tok.vocab_size <= T5Config.tiny().vocab_size


def test_batch_is_padded_with_eos_and_mask(tokenizer):
    ids, mask = tokenizer(['pick up the red cup', 'open the drawer and close it'])
    assert ids.shape == mask.shape == (2, MAX_LENGTH)
    assert ids.dtype == mask.dtype == torch.int64
    for row in range(2):
        count = int(mask[row].sum())
        assert count > 2
        assert mask[row, :count].eq(1).all() and mask[row, count:].eq(0).all()
        assert ids[row, count - 1] == tokenizer.eos_id
        assert ids[row, : count - 1].ne(tokenizer.eos_id).all()
        assert ids[row, count:].eq(tokenizer.pad_id).all()
    assert torch.equal(tokenizer('pick up the red cup')[0], ids[:1])


def test_empty_prompt_is_only_eos(tokenizer):
    ids, mask = tokenizer('')
    assert ids[0, 0] == tokenizer.eos_id and int(mask.sum()) == 1


def test_cleaning_matches_wan_whitespace_clean(tokenizer):
    assert clean_prompt('  pick\tup \n the   cup ') == 'pick up the cup'
    assert clean_prompt('salt &amp;amp; pepper') == 'salt & pepper'
    assert clean_prompt('the robot\u2019s \u201cwrist\u201d') == 'the robot\'s "wrist"'
    plain = tokenizer('the robot\'s "wrist" view')[0]
    assert torch.equal(tokenizer('  the robot\u2019s  \u201cwrist\u201d\nview ')[0], plain)


def test_long_prompt_is_truncated_keeping_eos(tokenizer):
    ids, mask = tokenizer('stack the blue block on the green block ' * 200)
    assert mask.all()
    assert ids[0, -1] == tokenizer.eos_id
    assert ids[0, :-1].ne(tokenizer.pad_id).all()


def test_short_max_length(tmp_path):
    tok = UMT5Tokenizer(train_tiny_tokenizer(tmp_path), max_length=4)
    ids, mask = tok('wipe the table with the towel')
    assert ids.shape == (1, 4) and mask.all() and ids[0, -1] == tok.eos_id


def test_bad_inputs_raise(tokenizer, tmp_path):
    with pytest.raises(FileNotFoundError, match='spiece.model'):
        UMT5Tokenizer.from_folder(tmp_path)
    with pytest.raises(TypeError):
        tokenizer([])
    with pytest.raises(TypeError):
        tokenizer(['ok', 3])
    with pytest.raises(ValueError, match='max_length'):
        UMT5Tokenizer(train_tiny_tokenizer(tmp_path), max_length=0)


def test_model_without_pad_piece_is_refused(tmp_path):
    path = tmp_path / 'nopad.model'
    with path.open('wb') as writer:
        spm.SentencePieceTrainer.train(
            sentence_iterator=iter(['pick up the cup', 'open the drawer'] * 20),
            model_writer=writer,
            vocab_size=30,
            hard_vocab_limit=False,
            pad_id=-1,
            minloglevel=2,
        )
    with pytest.raises(ValueError, match='<pad>'):
        UMT5Tokenizer(path)

"""A split whose class folders are partly empty (``zoo eval-frames`` on 5 empty of 8): the error names the empty
classes, not "no videos in <split>" (the folder does hold videos); a split with no videos at all keeps that message."""
import os

import pytest

from zoo.datasets.splits import open_video_split


def _split(root, full, empty):
    for c in full:
        os.makedirs(root / 'val' / c)
        (root / 'val' / c / '0.mp4').write_bytes(b'x')   # listing looks at names only
    for c in empty:
        os.makedirs(root / 'val' / c)
    return str(root / 'val')


def test_partly_empty_class_folders_are_named(tmp_path):
    val = _split(tmp_path, 'abc', 'defgh')
    with pytest.raises(FileNotFoundError) as e:
        open_video_split(val, str(tmp_path))
    msg = str(e.value)
    assert msg.startswith(f"class folder(s) ['d', 'e', 'f', 'g', 'h'] of {val!r} hold no videos (5 of 8 class "
                          "folders; extensions .mp4"), msg
    assert msg.endswith('add videos or remove the empty folder(s)') and 'no videos in' not in msg
    assert '\n' not in msg


def test_a_split_without_videos_still_says_so(tmp_path):
    val = _split(tmp_path, '', 'ab')
    with pytest.raises(FileNotFoundError, match=rf"^no videos in '{val}': expected"):
        open_video_split(val, str(tmp_path))

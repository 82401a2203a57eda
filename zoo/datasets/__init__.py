"""The data floor (imports nothing above it): image and video folders that count unreadable files instead of
crashing (one safe-folder base, :mod:`zoo.datasets.folder`), a video reader with exact frames and true timestamps
(decord where it installs and is verified per file, else PyAV: :mod:`zoo.datasets.video_streams`) and logged frame
sampling, splits and loaders (:mod:`zoo.datasets.splits`), atomic writes
(:mod:`zoo.datasets.files`), video-QA benchmark readers (:mod:`zoo.datasets.videoqa`) and synthetic video generators
(:mod:`zoo.datasets.synthetic_video`, :mod:`zoo.datasets.synthetic_videoqa`)."""
from .image_folder import BadSample, SafeImageFolder, collate_skip_bad, find_split, open_image_folder
from .video import (VIDEO_EXTENSIONS, FrameCache, FrameSampling, VideoClip, VideoInfo, VideoMemoryError, VideoReadError,
                    frames_to_clip, probe_video, read_video, resize_frames, video_backend)
from .video_folder import BadVideo, SafeVideoFolder, collate_video_skip_bad, count_bad, open_video_folder

__all__ = ['BadSample', 'SafeImageFolder', 'collate_skip_bad', 'find_split', 'open_image_folder',
           'VIDEO_EXTENSIONS', 'FrameCache', 'FrameSampling', 'VideoClip', 'VideoInfo', 'VideoMemoryError',
           'VideoReadError', 'frames_to_clip', 'probe_video', 'read_video', 'resize_frames', 'video_backend',
           'BadVideo', 'SafeVideoFolder', 'collate_video_skip_bad', 'count_bad', 'open_video_folder']

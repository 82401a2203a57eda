"""Image datasets: ImageFolder trees that count unreadable images instead of crashing."""
from .image_folder import BadSample, SafeImageFolder, collate_skip_bad, find_split, open_image_folder

__all__ = ['BadSample', 'SafeImageFolder', 'collate_skip_bad', 'find_split', 'open_image_folder']

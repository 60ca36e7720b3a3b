"""The file-system view derived from the timeline: file groups, their slices and data
files, as of any instant."""

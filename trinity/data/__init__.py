"""Built-in synthetic datasets (tasksets and SFT data) generated locally, so no download is needed."""

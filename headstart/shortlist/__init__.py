"""Shortlisted training: each label on its positives plus a shortlist of hard negatives."""

"""Label-tree training and beam-search prediction (LibMultiLabel's ``train_tree``,
after Bonsai): labels clustered recursively by k-means, one one-vs-all problem per
node trained on the node's instances only, top-k labels by beam search.

* :func:`fit_tree` -- build the tree and train every node (headstart's core per node);
* :class:`TreeModel` -- ``predict_topk(X, k, beam_width=10)`` and ``save(path)``;
* :func:`load_tree` -- read a saved tree model directory;
* :func:`fit_ensemble` / :class:`TreeEnsemble` / :func:`load_ensemble` -- several trees of
  different seeds, their beam-search scores averaged (LibMultiLabel's ensemble).
"""

from .build import Tree, build_tree, kmeans, label_representations
from .model import TreeModel, label_counts_of, load_tree
from .ensemble import TreeEnsemble, fit_ensemble, is_ensemble, load_ensemble
from .train import fit_tree

__all__ = ["Tree", "TreeModel", "build_tree", "fit_tree", "kmeans", "label_counts_of", "label_representations", "load_tree",
           "TreeEnsemble", "fit_ensemble", "is_ensemble", "load_ensemble"]

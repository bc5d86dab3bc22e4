"""``kvrules explain``: why a point got its verdict and why no other step decided it.

* :mod:`.point` - one point (or every ineligible point of a cell) and its deciding step;
* :mod:`.cell` - a cell's qualification groups, condition by condition and scope by scope;
* :mod:`.report` - the explanation as text or JSON;
* :mod:`.causes`, :mod:`.whynot`, :mod:`.rulefacts`, :mod:`.phrases` - the root cause of an
  ineligible point, the pattern that failed, the evidence behind it and its wording;
* :mod:`.joins` - rules replayed over a cell's facts with the reference semantics.
"""

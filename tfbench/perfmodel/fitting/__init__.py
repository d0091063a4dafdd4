"""The model fitted on tfbench's own runs, and how sure each fit is.

observations  what a run says to the model
params        the parameters file that `fit` writes and `predict` reads
fit           the fit of the parameters on observations
validate      held-out errors of a fit
scale         errors by worker count and their trend
spread        the bootstrap over tfbench runs that gives a fit's predictions their intervals
synthetic     runs made by the model itself, where the intervals' calibration can be checked
measured      what tfbench's fits measured (shares, chi, overheads, apply), for predictions with no fit
nofit         the rule of a prediction with no fit: its point and range from what measured holds
"""

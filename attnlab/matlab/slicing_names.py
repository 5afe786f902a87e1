"""The names the slicer (slicing.py) knows: the functions that make networks (the slice's
seeds), which arguments of training and prediction are data, the calls and words that change a
workspace in ways the text does not say, and the MATLAB functions a script may use as bare
names."""
from __future__ import annotations

# the functions whose calls make a network, its layers or its training (the slice's seeds);
# any function named …Layer is a layer function too
SEEDS = frozenset({
    "dlnetwork", "layerGraph", "addLayers", "connectLayers", "disconnectLayers", "removeLayers",
    "replaceLayer", "initialize", "setLayerWeights", "trainingOptions", "trainnet",
    "trainNetwork", "setLearnRateFactor", "setL2Factor", "networkLayer", "freezeWeights",
    "assembleNetwork",
})
# training and prediction: which of their positional arguments are data (not followed)
_TRAINING = {"trainNetwork": 2, "trainnet": 3}          # all but the last N are data
_PREDICTING = frozenset({"predict", "classify", "minibatchpredict", "predictAndUpdateState",
                         "forward", "activations"})     # all after the network are data
# names that change a workspace in ways the text does not say
_UNSURE = frozenset({"eval", "evalin", "evalc", "assignin"})
# words of `clear` that remove every variable (others: functions, mex, global, … keep them)
_CLEAR_ALL = frozenset({"all", "-all", "variables", "-variables", "-v"})
_CLEAR_WORDS = frozenset({"functions", "-functions", "classes", "-classes", "global", "-global",
                          "mex", "import", "java"})
_STATEMENTS = frozenset({"assignment", "command", "if_statement", "for_statement",
                         "while_statement", "switch_statement", "try_statement",
                         "break_statement", "continue_statement", "return_statement",
                         "global_operator", "persistent_operator", "spmd_statement"})
_SKIP = frozenset({"comment", "line_continuation", "function_definition",
                   "arguments_statement"})

# MATLAB functions and constants a script uses as bare names or calls that the reader does not
# run itself (its own are `known`): never reported as undefined
MATLAB_FUNCTIONS = frozenset("""
ans i j pi eps Inf inf NaN nan NaT true false missing realmax realmin intmax intmin flintmax
rand randn randi rng tic toc clock now date cputime pwd cd version ver computer matlabroot
tempdir tempname userpath getenv setenv nargin nargout varargin varargout narginchk
nargoutchk inputname mfilename dbstack lasterr lastwarn rethrow newline who whos path ispc
isunix ismac feature memory maxNumCompThreads parpool gcp gpuDevice gpuDeviceCount canUseGPU
gcf gca gco figure clc beep pause drawnow keyboard input zeros ones eye cell struct string char
table categorical datetime duration containers cellfun arrayfun structfun isempty numel size
length ndims isscalar isvector ismatrix isrow iscolumn isnumeric ischar isstring iscell
isstruct islogical isa class func2str str2func feval exist isvarname fieldnames rmfield
setfield getfield numel disp display fprintf sprintf num2str str2double mat2str int2str
error warning assert abs sign sqrt exp log log2 log10 sin cos tan tanh sigmoid floor ceil
round fix mod rem max min sum prod mean median std var cumsum cumprod sort unique find any
all isnan isinf isfinite numel reshape repmat cat horzcat vertcat squeeze permute linspace
colon logical double single int8 int16 int32 int64 uint8 uint16 uint32 uint64 true false
strcat strsplit strjoin strrep strtrim upper lower contains startsWith endsWith regexp
regexprep sprintf fullfile fileparts filesep exist dir mkdir isfile isfolder save load run
close hold grid axis legend title xlabel ylabel subplot plot figure format more diary echo
clear clearvars cla clf colorbar colormap datestr filesep pathsep
nnet deep images audio signal vision java py matlab parallel stats
alexnet googlenet inceptionv3 inceptionresnetv2 densenet201 mobilenetv2 resnet18 resnet50
resnet101 squeezenet vgg16 vgg19 xception nasnetlarge nasnetmobile shufflenet darknet19
darknet53 efficientnetb0
""".split())

% Pattern: a lab repository's MEG spike classifier pipeline, a function file taking varargin:
% defaults in an opts struct overridden by a local name-value parser (opts.(name) = value, an
% assert), rng(seed, 'twister'), mkdir behind exist, a load of cell arrays, a grouped split by
% a helper from another file, reordercats, per-channel z-scoring with a function handle through
% cellfun(..., 'UniformOutput', false), a fixed SequenceLength passed as padArgs{:}, class
% weights from countcats into classificationLayer('Classes', cats, 'ClassWeights', w), the
% input size taken from the data before the transformer branch adds 32 positional rows, then a
% switch on lower(opts.arch): a BiLSTM that swaps its output layer in with
% arrayfun(@(L) isa(L, ...)), a folded time-distributed GRU, and the default 'transformer' built
% with addLayers/connectLayers and replaceLayer(lg, "cls", clsLayer); a ternary helper for
% ExecutionEnvironment; classify, confusionmat, struct metadata, save.
% Source: GitHub repository.
% MATLAB: with the data the 'transformer' network is clean, 17 layers (attnlab: 16, the
% classification output becomes the loss); its size inputSize and the output layer's classes
% and weights come from the data. With inputSize = 306: proj 128*306 + 128 = 39,296, two layer
% norms 256 each, selfAttention(8, 16) on 128 channels 3*(16*128 + 16) + (128*16 + 128) = 8,368,
% ff1 512*128 + 512 = 66,048, ff2 128*512 + 128 = 65,664, fc 258: 180,146 learnables.
% Expect: exit 2 "--set inputSize=VALUE"
% Expect-with: --set inputSize=306 --set "cats={'NoSpike';'Spike'}" --set "w=[0.6;1.4]" -> exit 0 "16 layers" "no issues" learnables=180146
function run_spike_classifier(varargin)
%% settings
opts.dataFile = '/data/MEG/SpikeDetection/trials.mat';
opts.modelDir = fullfile('/data/MEG/SpikeDetection', 'models_classifier');
opts.useGPU = false;
opts.verbose = true;
opts.valFrac = 0.15;
opts.arch = 'transformer';      % 'lstm' | 'gru_td' | 'transformer'
opts.dModel = 128;              % transformer width
opts.numHeads = 8;              % transformer heads
opts.seed = 0;
rng(opts.seed, 'twister');

opts = parse_inputs(opts, varargin{:});
if ~exist(opts.modelDir, 'dir'); mkdir(opts.modelDir); end

%% data and a split by recording group
load(opts.dataFile, 'data', 'labels', 'groups');
[trainMask, valMask] = group_holdout_split(groups, opts.valFrac, opts.seed);
XTrain = data(trainMask);   YTrain = labels(trainMask);
XVal = data(valMask);       YVal = labels(valMask);

cats = categories(YTrain);
YTrain = reordercats(YTrain, cats);
YVal = reordercats(YVal, cats);

%% channel-wise normalisation
[mu, sd] = fit_channel_stats(XTrain);
zscoref = @(x) (x - mu) ./ max(sd, 1e-12);
XTrain2 = cellfun(zscoref, XTrain, 'UniformOutput', false);
XVal2 = cellfun(zscoref, XVal, 'UniformOutput', false);

% one sequence length for both sets
Ttrain = cellfun(@(x) size(x, 2), XTrain2);
Tfix = max(1, round(prctile(Ttrain(:), 95)));
padArgs = {"SequenceLength", Tfix, "SequencePaddingDirection", "right"};

% class weights instead of oversampling
cnt = countcats(YTrain);
w = sum(cnt) ./ max(cnt, 1); w = w / mean(w);
clsLayer = classificationLayer('Name', 'cls', 'Classes', cats, 'ClassWeights', w);

chCounts = cellfun(@(x) size(x, 1), XTrain2);
uCh = unique(chCounts);
assert(numel(uCh) == 1, 'Inconsistent channel counts across epochs: %s', mat2str(uCh));
inputSize = uCh(1);
fprintf('Tfix=%d | inputSize=%d\n', Tfix, inputSize);

% positional channels for the transformer
if strcmpi(opts.arch, 'transformer')
    addPos = @(x) [x; 0.05*make_posenc(size(x, 2), 32)];   % adds 32 rows
    XTrain2 = cellfun(addPos, XTrain2, 'UniformOutput', false);
    XVal2 = cellfun(addPos, XVal2, 'UniformOutput', false);
end

switch lower(opts.arch)
    case 'lstm'
        layers = [
            sequenceInputLayer(inputSize, 'Normalization', 'none')
            bilstmLayer(256, 'OutputMode', 'sequence')
            dropoutLayer(0.2)
            bilstmLayer(64, 'OutputMode', 'last')
            dropoutLayer(0.2)
            fullyConnectedLayer(2)
            softmaxLayer
            classificationLayer('Name', 'cls')];
        idx = arrayfun(@(L) isa(L, 'nnet.cnn.layer.ClassificationLayer'), layers);
        layers(idx) = clsLayer;
        trainOpts = trainingOptions('adam', 'InitialLearnRate', 3e-4, 'MaxEpochs', 120, ...
            'MiniBatchSize', 64, padArgs{:}, 'ValidationData', {XVal2, YVal}, ...
            'ExecutionEnvironment', ternary(opts.useGPU, 'gpu', 'cpu'), 'Verbose', opts.verbose);
        net = trainNetwork(XTrain2, YTrain, layers, trainOpts);
        mdlName = 'lstm_spike_classifier.mat';

    case 'gru_td'    % a fully connected layer applied at every step through folding
        lg = layerGraph();
        lg = addLayers(lg, sequenceInputLayer(inputSize, "Normalization", "none", "Name", "input"));
        lg = addLayers(lg, sequenceFoldingLayer("Name", "fold"));
        lg = addLayers(lg, fullyConnectedLayer(32, "Name", "fc_td"));
        lg = addLayers(lg, reluLayer("Name", "relu_td"));
        lg = addLayers(lg, sequenceUnfoldingLayer("Name", "unfold"));
        lg = addLayers(lg, flattenLayer("Name", "flat"));
        lg = addLayers(lg, [
            gruLayer(64, "OutputMode", "last", "Name", "gru")
            dropoutLayer(0.2, "Name", "drop")
            fullyConnectedLayer(2, "Name", "fc")
            softmaxLayer("Name", "sm")
            classificationLayer("Name", "cls")]);
        lg = connectLayers(lg, "input", "fold/in");
        lg = connectLayers(lg, "fold/out", "fc_td");
        lg = connectLayers(lg, "fc_td", "relu_td");
        lg = connectLayers(lg, "relu_td", "unfold/in");
        lg = connectLayers(lg, "unfold/out", "flat");
        lg = connectLayers(lg, "flat", "gru");
        lg = connectLayers(lg, "fold/miniBatchSize", "unfold/miniBatchSize");
        lg = replaceLayer(lg, "cls", clsLayer);
        trainOpts = trainingOptions("adam", "InitialLearnRate", 1e-3, "MaxEpochs", 100, ...
            "MiniBatchSize", 64, padArgs{:}, "ValidationData", {XVal2, YVal}, ...
            "ExecutionEnvironment", ternary(opts.useGPU, 'gpu', 'cpu'), "Verbose", opts.verbose);
        net = trainNetwork(XTrain2, YTrain, lg, trainOpts);
        mdlName = 'grutd_spike_classifier.mat';

    case 'transformer'
        mb = 128; lr = 3e-4; maxE = 150;
        valFreq = max(5, ceil(numel(XTrain2)/mb));
        dModel = opts.dModel; numHeads = opts.numHeads; keyDim = dModel/numHeads;
        lg = layerGraph();
        lg = addLayers(lg, sequenceInputLayer(inputSize, "Normalization", "none", "Name", "in"));
        lg = addLayers(lg, fullyConnectedLayer(dModel, "Name", "proj"));
        % encoder, pre-norm
        lg = addLayers(lg, layerNormalizationLayer("Name", "ln1"));
        lg = addLayers(lg, selfAttentionLayer(numHeads, keyDim, "DropoutProbability", 0.1, "Name", "mha1"));
        lg = addLayers(lg, dropoutLayer(0.1, "Name", "drop_attn"));
        lg = addLayers(lg, additionLayer(2, "Name", "add_attn"));
        lg = addLayers(lg, layerNormalizationLayer("Name", "ln2"));
        lg = addLayers(lg, [
            fullyConnectedLayer(4*dModel, "Name", "ff1")
            reluLayer("Name", "relu1")
            dropoutLayer(0.1, "Name", "drop_ff")
            fullyConnectedLayer(dModel, "Name", "ff2")]);
        lg = addLayers(lg, additionLayer(2, "Name", "add_ff"));
        % head
        lg = addLayers(lg, globalAveragePooling1dLayer("Name", "gap"));
        lg = addLayers(lg, dropoutLayer(0.2, "Name", "head_drop"));
        lg = addLayers(lg, fullyConnectedLayer(2, "Name", "fc"));
        lg = addLayers(lg, softmaxLayer("Name", "sm"));
        lg = addLayers(lg, classificationLayer("Name", "cls"));
        % wiring
        lg = connectLayers(lg, "in", "proj");
        lg = connectLayers(lg, "proj", "ln1");
        lg = connectLayers(lg, "ln1", "mha1");
        lg = connectLayers(lg, "mha1", "drop_attn");
        lg = connectLayers(lg, "drop_attn", "add_attn/in1");
        lg = connectLayers(lg, "ln1", "add_attn/in2");
        lg = connectLayers(lg, "add_attn", "ln2");
        lg = connectLayers(lg, "ln2", "ff1");
        lg = connectLayers(lg, "ff2", "add_ff/in1");
        lg = connectLayers(lg, "add_attn", "add_ff/in2");
        lg = connectLayers(lg, "add_ff", "gap");
        lg = connectLayers(lg, "gap", "head_drop");
        lg = connectLayers(lg, "head_drop", "fc");
        lg = connectLayers(lg, "fc", "sm");
        lg = connectLayers(lg, "sm", "cls");
        trainOpts = trainingOptions("adam", ...
            "InitialLearnRate", lr, ...
            "MaxEpochs", maxE, ...
            "MiniBatchSize", mb, ...
            'GradientThresholdMethod', 'l2norm', ...
            'GradientThreshold', 1, ...
            padArgs{:}, ...
            "Shuffle", "every-epoch", ...
            "ValidationData", {XVal2, YVal}, ...
            "ValidationFrequency", valFreq, ...
            "ValidationPatience", 15, ...
            "ExecutionEnvironment", ternary(opts.useGPU, 'gpu', 'cpu'), ...
            "Verbose", opts.verbose, ...
            "Plots", "training-progress", ...
            "CheckpointPath", opts.modelDir);
        lg = replaceLayer(lg, "cls", clsLayer);
        net = trainNetwork(XTrain2, YTrain, lg, trainOpts);
        mdlName = 'transformer_spike_classifier.mat';

    otherwise
        error('Unknown arch: %s. Use ''lstm'', ''gru_td'' or ''transformer''.', opts.arch);
end

%% evaluation and saving
[YP, score] = classify(net, XVal2);
cm = confusionmat(YVal, YP, 'Order', categories(YVal));
acc = sum(diag(cm)) / sum(cm, 'all');
rec = diag(cm) ./ max(1, sum(cm, 2));
balAcc = mean(rec, 'omitnan');
meta = struct('matlabVersion', version, ...
              'timestamp', char(datetime('now', 'Format', 'yyyy-MM-dd HH:mm:ss')));
save(fullfile(opts.modelDir, mdlName), 'net', 'opts', 'trainOpts', 'cm', 'acc', 'balAcc', 'meta');
end

function opts = parse_inputs(opts, varargin)
if mod(numel(varargin), 2) ~= 0
    error('Options must be given as name-value pairs.');
end
for k = 1:2:numel(varargin)
    name = varargin{k};
    if ~isfield(opts, name)
        error('Unknown option: %s', name);
    end
    opts.(name) = varargin{k + 1};
end
assert(mod(opts.dModel, opts.numHeads) == 0, 'dModel must be divisible by numHeads');
end

function out = ternary(cond, a, b)
if cond
    out = a;
else
    out = b;
end
end

% Pattern: a repository's function that classifies image sequences per time step with a BiLSTM
% under k-fold cross-validation: crossvalind('Kfold', ...), sizes from the first cell of R, an
% argument named dir (shadowing the function), labels repeated over time with
% num2cell(repmat(...), 2), `parfor i = 1:nFolds` training net{i} = trainNetwork(...), then
% classifyAndUpdateState step by step into a 3-D score array, permute, an anonymous function of
% two arguments, ismember, nanmean. The metrics loop uses testLoc and obj, which the function
% assigns nowhere.
% Source: GitHub repository.
% MATLAB: called with its data the function trains the nFolds networks (the bilstm network is
% clean) and then stops in the metrics loop with "Unrecognized function or variable
% 'testLoc'." (inside a function no caller's workspace can supply it).
% Expect: exit 2 "Unrecognized function or variable 'testLoc'."
% Expect-with: --set "R={ones(4, 6), ones(4, 6), ones(4, 6)}" --set "dir=[1 2 1]" --set nFolds=3 --set nNode=8 -> exit 2 "Unrecognized function or variable 'testLoc'."
function i1_m = run_lstm_classification(R, dir, nFolds, nNode)
% run_lstm_classification trains a BiLSTM per fold and scores every time step.
%   R      - cell array, one features-by-time matrix per observation
%   dir    - class of each observation
%   nFolds - number of folds
%   nNode  - hidden units of the BiLSTM

ind = crossvalind('Kfold', length(dir), nFolds);
nrTimes = size(R{1}, 2);          % time steps (the same for every sequence)
nrImgs = size(R, 2);              % number of sequences
nrObjs = length(unique(dir));     % number of classes
inputSize = size(R{1}, 1);        % features per time step
outputSize = nNode;
outputMode = 'sequence';
numClasses = nrObjs;

layers = [ ...
    sequenceInputLayer(inputSize)
    bilstmLayer(outputSize, 'OutputMode', outputMode)
    fullyConnectedLayer(numClasses)
    softmaxLayer
    classificationLayer];

maxEpochs = 120;
miniBatchSize = 27;
options = trainingOptions('sgdm', ...
    'MaxEpochs', maxEpochs, ...
    'MiniBatchSize', miniBatchSize, ...
    'ExecutionEnvironment', 'cpu', ...
    'Verbose', 0);

objNr = categorical(dir);
repTimes = nrTimes;

% one model per fold
parfor i = 1:nFolds
    trainLabel = num2cell(repmat(objNr(ind ~= i), 1, repTimes), 2);
    train = R(ind ~= i);
    net{i} = trainNetwork(train, trainLabel, layers, options);
end
disp('Done with model training')

score = nan(nrTimes, nrObjs, nrImgs);
for i = 1:nFolds
    test = R(ind == i);
    indloc = find(ind == i);
    for j = 1:numel(indloc)
        mnet = net{i};
        for time = 1:nrTimes
            [mnet, ~, score(time, :, indloc(j))] = classifyAndUpdateState(mnet, test{j}(:, time));
        end
    end
end
disp('Running tests')

dp = nan(nrImgs, nrTimes);
i1_m = nan(nrImgs, nrTimes);
for i = 1:nrTimes
    posterior = permute(score(i, :, :), [3 2 1]);
    pr_c = @(a, i) (repmat(a(1, i), 1, nrObjs - 1) ./ (a(1, ~ismember(1:nrObjs, i)) + repmat(a(1, i), 1, nrObjs - 1)));
    i2 = nan(sum(testLoc), nrObjs);
    for j = 1:numel(obj)
        i2(j, ~ismember(1:nrObjs, obj(j))) = pr_c(posterior(j, :), obj(j));
    end
    i1_m(:, i) = nanmean(i2, 2);
end
end

% Pattern: the same repository's k-fold cross-validation per user, written as one script with
% its helpers as local functions: [len, ch] = size(...) of the first sequence, cvpartition with
% KFold=, cell arrays of table rows per fold, a `parfor (j = 1:k)` loop whose body builds and
% trains a BiLSTM + selfAttentionLayer model in a local function and scores it in another
% (a "CBT" dlarray filled through permute, max over classes, categorical(classes(idx),
% classes), a results table appended with writetable), accuracies logged with fopen/fprintf.
% Source: GitHub repository (kfold driver, attbilstm model file and neteval helper).
% MATLAB: the network (built in attbilstm) is clean, 6 layers; its input size ch comes from the
% data. With ch = 6: bilstm(60) 2*(4*60*(6 + 60) + 4*60) = 32,160; selfAttention(2, 60) on 120
% channels 3*(60*120 + 60) + (120*60 + 120) = 29,100; fc(5) 605: 61,865 learnables.
% Expect: exit 2 "--set ch=VALUE"
% Expect-with: --set ch=6 -> exit 0 "6 layers" "no issues" learnables=61865
load("surface_users.mat", "data");       % 1-by-5 cell: one table of sequences and labels per user
k = 10;
[len, ch] = size(data{1}.sequences{1});
acc = zeros(1, 5);

for i = 1:5
    fprintf("User %d:\n", i);

    % k pieces of this user's data
    cv = cvpartition(data{i}.labels, KFold=k);
    data_train = cell(1, k);
    data_test = cell(1, k);
    for j = 1:k
        data_train{j} = data{i}(cv.training(j), :);
        data_test{j} = data{i}(cv.test(j), :);
    end

    tic
    kacc = zeros(k, 1);
    parfor (j = 1:k)
        net = attbilstm(ch, data_train{j});
        kacc(j) = neteval(net, data_test{j}, "");
    end
    toc

    f = fopen("logs/kfold/attbilstm_k10.txt", "a+");
    fprintf(f, "%f,", kacc);
    fprintf(f, "\n");
    fclose(f);

    acc(i) = mean(kacc);
    fprintf("Average accuracy for user %d: %.4f\n", i, acc(i));
end
fprintf("Final accuracy across users: %.4f\n", mean(acc));

function net = attbilstm(num_channels, dataset_train)
    layers = [
        sequenceInputLayer(num_channels)
        bilstmLayer(60)
        selfAttentionLayer(2, 60)
        globalAveragePooling1dLayer
        fullyConnectedLayer(5)
        softmaxLayer];

    options = trainingOptions('adam', ...
        MaxEpochs=200, ...
        InitialLearnRate=0.002, ...
        GradientThreshold=1, ...
        Shuffle='every-epoch', ...
        LearnRateSchedule='piecewise', ...
        LearnRateDropPeriod=50, ...
        LearnRateDropFactor=0.5, ...
        Verbose=false);

    net = trainnet(dataset_train.sequences, dataset_train.labels, layers, 'crossentropy', options);
end

function accuracy = neteval(net, dataset, filename)
    xcell = dataset.sequences;
    ytest = dataset.labels;
    n = numel(xcell);

    [seqlen, numchannels] = size(xcell{1});
    xarr = zeros(numchannels, n, seqlen, 'single');
    for s = 1:n
        xarr(:, s, :) = permute(single(xcell{s}), [2 3 1]);
    end
    dlx = dlarray(xarr, 'CBT');

    scores = predict(net, dlx);
    [~, idx] = max(extractdata(scores), [], 1);
    classes = categories(ytest);
    ypred = categorical(classes(idx), classes);

    if filename ~= ""
        results = table(ytest, ypred, 'VariableNames', ["True", "Predicted"]);
        writetable(results, filename, WriteMode='append');
    end
    accuracy = mean(ypred == ytest);
end
